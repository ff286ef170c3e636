"""Pure judgements: facts + knowledge base -> checks, per-target verdicts, findings; a log's known problems. No effects."""
