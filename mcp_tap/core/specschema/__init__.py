"""The official JSON Schemas of each revision, copied from the published specification
(``schema/<revision>/schema.json`` of
https://github.com/modelcontextprotocol/modelcontextprotocol) and shipped as package data."""
