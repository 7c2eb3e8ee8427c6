"""Data stage: toy-world and hub sources in the real schemas, SFT mixes, pre-staging and its pre-flight check."""
