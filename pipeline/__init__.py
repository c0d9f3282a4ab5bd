"""The shell: turn engine, providers, tools, importers/exporters, CLI."""
