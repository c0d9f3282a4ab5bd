"""A corpus of planted secrets, one per common shape (issue #17).

Used by ``tests/pipeline/test_hostile_secrets.py`` (every shape x every surface,
0 leaks) and ``benchmarks/bench_scrub.py`` (scrub throughput over the same
corpus). :func:`gitleaks_cases` reads the second corpus, the true positives of
gitleaks' own rule fixtures (``tests/fixtures/secrets/gitleaks_tps.json``). Every
value is fake but has the real shape. Each entry is ``(shape, planted text,
secret)``: the planted text holds the secret once, in the context it is usually
found in; the secret must not survive anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

_B64_40: Final = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE12"
_JWT: Final = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
_PEM_BODY: Final = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"

CORPUS: Final[tuple[tuple[str, str, str], ...]] = (
    ("aws access key id", "key id AKIAIOSFODNN7EXAMPL3 in use", "AKIAIOSFODNN7EXAMPL3"),
    ("aws session key id", "ASIAY34FZKBOKMUTVV7A expired", "ASIAY34FZKBOKMUTVV7A"),
    ("aws secret, bare", f"the secret is {_B64_40} ok", _B64_40),
    (
        "aws secret, env",
        "AWS_SECRET_ACCESS_KEY=Xb7rP2kLq9Vz4Nw8Tc3Hy6Jm1Fd5Gs0AaQeRtYuI",
        "Xb7rP2kLq9Vz4Nw8Tc3Hy6Jm1Fd5Gs0AaQeRtYuI",
    ),
    (
        "gcp api key",
        "maps key AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
        "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
    ),
    (
        "gcp oauth client secret",
        '{"client": "GOCSPX-1a2B3c4D5e6F7g8H9i0JkLmNoPq"}',
        "GOCSPX-1a2B3c4D5e6F7g8H9i0JkLmNoPq",
    ),
    (
        "gcp access token",
        "token ya29.a0AfB_byC1x2Y3z4W5v6U7t8S9r0Q ok",
        "ya29.a0AfB_byC1x2Y3z4W5v6U7t8S9r0Q",
    ),
    (
        "gcp service account private key",
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + _PEM_BODY
        + '\\n-----END PRIVATE KEY-----\\n"}',
        _PEM_BODY,
    ),
    (
        "azure storage account key",
        (
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
            "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq"
            "/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net"
        ),
        (
            "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq"
            "/K1SZFPTOtr/KBHBeksoGMGw=="
        ),
    ),
    (
        "azure ad client secret",
        "secret value abc8Q~Zx1Yw2Vu3Ts4Rq5Po6Nm7Lk8Ji9Hg0FeDc done",
        "abc8Q~Zx1Yw2Vu3Ts4Rq5Po6Nm7Lk8Ji9Hg0FeDc",
    ),
    (
        "azure sas signature",
        (
            "GET https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig="
            "k3Jx9VbN2mQ7pLr4TsW8yZ1aC5dE6fG0hI%3D"
        ),
        "k3Jx9VbN2mQ7pLr4TsW8yZ1aC5dE6fG0hI",
    ),
    (
        "openai key",
        "OPENAI_API_KEY is sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56",
        "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56",
    ),
    (
        "anthropic key",
        "using sk-ant-api03-Zy98Xw76Vu54Ts32Rq10Po98-AAAA for claude",
        "sk-ant-api03-Zy98Xw76Vu54Ts32Rq10Po98-AAAA",
    ),
    (
        "github classic token",
        "push with ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    ),
    (
        "github oauth token",
        "gho_16C7e42F292c6912E7710c838347Ae178B4a was issued",
        "gho_16C7e42F292c6912E7710c838347Ae178B4a",
    ),
    (
        "github fine-grained token",
        "github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789",
        "github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789",
    ),
    (
        "gitlab token",
        "CI uses glpat-x9Y8w7V6u5T4s3R2q1P0 daily",
        "glpat-x9Y8w7V6u5T4s3R2q1P0",
    ),
    (
        "slack bot token",
        "xoxb-2048-4096-Ab12Cd34Ef56Gh78 posted",
        "xoxb-2048-4096-Ab12Cd34Ef56Gh78",
    ),
    (
        "slack app token",
        "xapp-1-A0123456789-0123456789-abcdef0123",
        "xapp-1-A0123456789-0123456789-abcdef0123",
    ),
    (
        "slack webhook",
        "notify https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/Xq9Wv8Ut7Sr6Qp5",
        "T0AB12CD3/B0EF45GH6/Xq9Wv8Ut7Sr6Qp5",
    ),
    (
        "stripe live secret key",
        "charge with sk_live_51HxY2zAbCdEfGhIjKlMnOpQr now",
        "sk_live_51HxY2zAbCdEfGhIjKlMnOpQr",
    ),
    (
        "stripe restricted key",
        "(rk_live_51HxY2zAbCdEfGhIjKlMnOpQr)",
        "rk_live_51HxY2zAbCdEfGhIjKlMnOpQr",
    ),
    (
        "stripe webhook secret",
        "whsec_Mn0pQrStUvWxYz12345678 configured",
        "whsec_Mn0pQrStUvWxYz12345678",
    ),
    (
        "npm token",
        "//registry.npmjs.org/:_authToken npm_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2",
        "npm_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2",
    ),
    (
        "hugging face token",
        "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456 pulled",
        "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456",
    ),
    (
        "pypi token",
        "twine -p pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAw upload",
        "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAw",
    ),
    (
        "sendgrid key",
        "SG.aB1cD2eF3gH4iJ5kL6mN7o.pQ8rS9tU0vW1xY2zA3bC4dE5fG6 mail",
        "SG.aB1cD2eF3gH4iJ5kL6mN7o.pQ8rS9tU0vW1xY2zA3bC4dE5fG6",
    ),
    (
        "digitalocean token",
        "dop_v1_0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d",
        "dop_v1_0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d",
    ),
    ("jwt, bare", f"cookie value {_JWT} end", _JWT),
    ("jwt, bearer header", f"Authorization: Bearer {_JWT}", _JWT[4:]),
    (
        "postgres url password",
        "connect postgres://app:Pg5ecret!pass@db.internal:5432/prod",
        "Pg5ecret!pass",
    ),
    (
        "mysql url password",
        "mysql://root:My5qlR00tPw@127.0.0.1/app",
        "My5qlR00tPw",
    ),
    ("redis url password", "redis://:R3disAuthT0k@cache:6379/0", "R3disAuthT0k"),
    (
        "https url password",
        "clone https://deploy:Htt9sPassw0rd@git.example.com/repo.git",
        "Htt9sPassw0rd",
    ),
    (
        "amqp url password",
        "amqp://guest:Rabb1tMQpass@mq:5672/",
        "Rabb1tMQpass",
    ),
    (
        "url query token",
        "GET https://api.example.com/v1/items?access_token=Qz8Wx7Vc6Bn5 failed",
        "Qz8Wx7Vc6Bn5",
    ),
    (
        "pem rsa private key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        _PEM_BODY,
    ),
    (
        "pem openssh key, cut",
        f"key:\n-----BEGIN OPENSSH PRIVATE KEY-----\n{_PEM_BODY[:40]}",
        _PEM_BODY[:40],
    ),
    ("password pair", "password=CorrectHorse9Battery", "orrectHorse9Battery"),
    (
        "high-entropy value under a secret-like key",
        "STRIPE_KEY=Zx81kQ0aPz3mN7vW2yT5uR9s",
        "Zx81kQ0aPz3mN7vW2yT5uR9s",
    ),
    (
        "json secret key",
        '{"client_secret": "9f8e7d6c5b4a39281706"}',
        "9f8e7d6c5b4a39281706",
    ),
    (
        "basic auth header",
        "Authorization: Basic ZGVwbG95Omh1bnRlcjJodW50ZXIy",
        "ZGVwbG95Omh1bnRlcjJodW50ZXIy"[4:],
    ),
)
"""(shape, planted text, secret) for every shape; more than 30 shapes."""

GITLEAKS_FIXTURE: Final = (
    Path(__file__).parent / "fixtures" / "secrets" / "gitleaks_tps.json"
)
"""The true positives of gitleaks' rule files (provenance inside)."""


def gitleaks_cases() -> list[tuple[str, str, str]]:
    """Return ``(rule id, planted text, secret)`` of every gitleaks fixture case.

    The secret is what the rule extracts from the text; ``scripts/
    gen_gitleaks_rules.py`` wrote the file from a gitleaks checkout.
    """
    data = json.loads(GITLEAKS_FIXTURE.read_text(encoding="utf-8"))
    return [(case["rule"], case["text"], case["secret"]) for case in data["cases"]]
