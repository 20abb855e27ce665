"""Typed answer documents and their renderings: text, JSON/YAML (`to_dict`) and HTML, one value each."""
