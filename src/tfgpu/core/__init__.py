"""The vocabulary every stage shares: records, typed errors, the one subprocess seam, terminal-safe text, OS helpers, the JSON Schemas. Imports no other stage."""
