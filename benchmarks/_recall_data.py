"""The recall-quality data set: conversations with known answers (built here, CC0).

Every fact is said the way a user says it; every question asks for it in other
words (paraphrase), as a later turn would. Kinds:

- ``single``: one fact answers the question;
- ``multi``: two facts are needed (both must be recalled);
- ``temporal``: two facts on one topic at different times; the question names
  the time, and only that fact is the answer;
- ``update``: the fact was stored, then restated under the same key; only the
  latest content may be recalled (latest wins);
- ``abstain``: nothing stored answers it: nothing may be injected.

Distractors are facts of the same shape about other things, so a question's
words also occur in rows that are not its answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

SINGLE = [
    (
        "pet",
        "My dog is named Biscuit, a three year old beagle",
        "what is my puppy called",
    ),
    (
        "editor",
        "Helix is the code editor I use every day",
        "which text editor do I program in",
    ),
    (
        "coffee",
        "I take my coffee with oat milk and no sugar",
        "how do I like my morning brew",
    ),
    ("car", "I drive a blue Subaru Outback", "what vehicle do I own"),
    ("allergy", "I am allergic to peanuts and cashews", "do I have any food allergies"),
    ("gym", "I go to the gym on Tuesdays and Thursdays", "which days do I work out"),
    ("birthday", "My birthday is on the 14th of February", "when is my birthday"),
    ("hometown", "I grew up in Porto, Portugal", "where did I spend my childhood"),
    (
        "language",
        "I am learning Japanese on weekends",
        "what foreign language am I studying",
    ),
    (
        "laptop",
        "My work laptop is a ThinkPad X1 Carbon",
        "what computer do I use for my job",
    ),
    ("manager", "My manager at work is Priya Raman", "who is my boss"),
    (
        "team",
        "I work on the payments infrastructure team",
        "which group am I part of at my job",
    ),
    (
        "deploy",
        "Production deploys happen on Wednesday afternoons",
        "when do we ship releases to prod",
    ),
    (
        "wifi",
        "The office wifi network is called Larkspur",
        "what is the wireless network name at the office",
    ),
    (
        "dentist",
        "My dentist appointment is on March 3rd at 10am",
        "when am I seeing the dentist",
    ),
    (
        "book",
        "I am reading The Left Hand of Darkness",
        "which novel am I in the middle of",
    ),
    ("sport", "I play five-a-side football on Monday evenings", "what sport do I play"),
    ("diet", "I have been vegetarian since 2019", "do I eat meat"),
    ("partner", "My partner's name is Jonas", "who is my significant other"),
    ("music", "I play the cello in a community orchestra", "what instrument do I play"),
    (
        "shell",
        "My terminal shell is fish with the starship prompt",
        "which command line shell do I use",
    ),
    ("timezone", "I live in the Central European time zone", "what timezone am I in"),
    ("commute", "I commute to work by bicycle", "how do I get to the office"),
    (
        "vacation",
        "Next summer I am going hiking in Patagonia",
        "where am I travelling on holiday",
    ),
]

MULTI = [
    (
        "sister",
        "My sister is called Ines",
        "sister_home",
        "Ines lives in Rotterdam",
        "which city does my sister live in",
    ),
    (
        "mentor",
        "My mentor is Dr. Okafor",
        "mentor_field",
        "Dr. Okafor researches coral reefs",
        "what does my mentor study",
    ),
    (
        "project",
        "I lead the Kestrel project",
        "kestrel_stack",
        "Kestrel is written in Rust and Postgres",
        "what technologies does the project I lead use",
    ),
    (
        "neighbour",
        "My neighbour is Tomasz",
        "tomasz_job",
        "Tomasz works as a firefighter",
        "what does my neighbour do for a living",
    ),
    (
        "friend",
        "My best friend is Aiko",
        "aiko_pet",
        "Aiko has a parrot named Mango",
        "what pet does my best friend have",
    ),
    (
        "landlord",
        "My landlord is Mr. Haddad",
        "haddad_phone",
        "Mr. Haddad's number is 555-0134",
        "how can I reach my landlord by phone",
    ),
]

TEMPORAL = [
    (
        "standup_june",
        "In June the daily standup moved to 9:30",
        "standup_sept",
        "In September the daily standup moved to 10:15",
        "what time did the standup move to in September",
        "standup_sept",
    ),
    (
        "rent_2024",
        "In 2024 my rent was 900 euros a month",
        "rent_2026",
        "In 2026 my rent went up to 1100 euros a month",
        "how much was my rent in 2024",
        "rent_2024",
    ),
    (
        "office_spring",
        "In spring the team sat on the third floor",
        "office_autumn",
        "In autumn the team moved to the fifth floor",
        "which floor did the team sit on in spring",
        "office_spring",
    ),
    (
        "trip_may",
        "In May I visited Lisbon for a conference",
        "trip_october",
        "In October I visited Kyoto for a wedding",
        "where did I travel in October",
        "trip_october",
    ),
    (
        "course_jan",
        "In January I took a course on statistics",
        "course_july",
        "In July I took a course on pottery",
        "what class did I take in July",
        "course_july",
    ),
]

UPDATE = [
    (
        "phone",
        "My phone is a Pixel 6",
        "My phone is now an iPhone 15",
        "what phone do I have",
        "iPhone 15",
    ),
    (
        "address",
        "I live at 12 Elm Street",
        "I moved, I now live at 48 Harbour Road",
        "what is my home address",
        "48 Harbour Road",
    ),
    (
        "role",
        "My job title is junior engineer",
        "I was promoted, my job title is staff engineer",
        "what is my position at work",
        "staff engineer",
    ),
    (
        "favourite_food",
        "My favourite food is lasagne",
        "These days my favourite food is ramen",
        "what dish do I like best",
        "ramen",
    ),
    (
        "bedtime",
        "I go to bed at 11pm",
        "Lately I go to bed at 10pm",
        "when do I go to sleep",
        "10pm",
    ),
    (
        "plan",
        "My gym plan is three days a week",
        "My gym plan is now five days a week",
        "how often do I train",
        "five days",
    ),
    (
        "ide_theme",
        "My editor theme is Solarized",
        "I switched my editor theme to Gruvbox",
        "which colour scheme do I use",
        "Gruvbox",
    ),
    (
        "standing_order",
        "My savings transfer is 200 euros monthly",
        "My savings transfer is now 350 euros monthly",
        "how much do I save each month",
        "350 euros",
    ),
]

ABSTAIN = [
    "what is my cat's name",
    "where did I go to university",
    "what is my blood type",
    "what is the weather like on Mars",
    "who won the football world cup in 1998",
    "what is my passport number",
    "how tall is the Eiffel tower",
    "what is my grandmother's maiden name",
    "which stocks do I own",
    "what is the capital of Australia",
    "what did I eat for breakfast yesterday",
    "is it going to rain tomorrow",
]

SUBJECTS = [
    "the quarterly report",
    "the budget review",
    "the hiring plan",
    "the data migration",
    "the security audit",
    "the kitchen renovation",
    "the garden shed",
    "the tax return",
    "the marketing launch",
    "the onboarding guide",
    "the API redesign",
    "the load test",
    "the school fundraiser",
    "the book club",
    "the photo backup",
    "the insurance claim",
]
_VERBS = [
    "is due on",
    "was moved to",
    "needs sign-off by",
    "starts on",
    "was postponed to",
    "should be reviewed before",
    "is blocked until",
    "was finished on",
]
_WHEN = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "the 3rd",
    "the 17th",
    "next week",
    "end of month",
    "the first of April",
    "mid June",
    "late November",
]
_EXTRA = [
    "according to Sam",
    "per the email from Lee",
    "after the team call",
    "as noted in the wiki",
    "pending approval",
    "if the vendor agrees",
    "",
    "",
]


@dataclass
class Question:
    """A question, its kind and what must be recalled (keys; or content for updates)."""

    kind: str
    text: str
    keys: tuple[str, ...] = ()
    latest: str = ""
    stale: str = ""


@dataclass
class DataSet:
    """What to store (in order, through the memory path) and what to ask."""

    writes: list[tuple[str, str]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def build(distractors: int, seed: int = 7) -> DataSet:
    """Build the writes (facts, updates after their originals, distractors)."""
    rng = random.Random(seed)
    data = DataSet()
    noise = [
        (
            f"note_{i}",
            f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(_VERBS)} "
            f"{rng.choice(_WHEN)} {rng.choice(_EXTRA)}".strip(),
        )
        for i in range(distractors)
    ]
    facts: list[tuple[str, str]] = []
    for key, fact, question in SINGLE:
        facts.append((key, fact))
        data.questions.append(Question("single", question, (key,)))
    for k1, f1, k2, f2, question in MULTI:
        facts += [(k1, f1), (k2, f2)]
        data.questions.append(Question("multi", question, (k1, k2)))
    for k1, f1, k2, f2, question, answer in TEMPORAL:
        facts += [(k1, f1), (k2, f2)]
        data.questions.append(Question("temporal", question, (answer,)))
    for key, old, _, question, latest in UPDATE:
        facts.append((key, old))
        data.questions.append(Question("update", question, (key,), latest, old))
    data.questions += [Question("abstain", q) for q in ABSTAIN]
    mixed = facts + noise
    rng.shuffle(mixed)
    # Updates come after everything else: the newest write of the key must win.
    data.writes = mixed + [(key, new) for key, _, new, _, _ in UPDATE]
    return data
