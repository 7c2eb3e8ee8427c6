"""The workflow over a config: rule-side helpers, ablations, dry-run plans and cost estimates."""
