"""Report stage: the paper's tables with 95% intervals, their summary paragraph, figures and report pages."""
