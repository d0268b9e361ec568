"""livebytes.cli: the presentation layer (typer app, rich rendering, JSON views, generated docs). Imports every layer below it."""
