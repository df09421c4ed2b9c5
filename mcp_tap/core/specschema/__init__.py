"""The official JSON Schemas of each revision, copied from the published specification
(``shared/spec/<revision>/schema.json``) and shipped as package data."""
