"""The knowledge base: compat/ data -> typed, validated, cached records, and the queries over them. Imports only core."""
