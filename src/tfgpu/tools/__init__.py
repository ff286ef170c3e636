"""Users of the stages, never used by them: explain's command side, lint, fleet, compat queries."""
