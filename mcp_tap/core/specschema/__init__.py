"""The official JSON Schemas of each revision (copied from the published specification), shipped as package data."""
