"""Model providers behind one Protocol: scripted, OpenAI-compatible, Anthropic."""
