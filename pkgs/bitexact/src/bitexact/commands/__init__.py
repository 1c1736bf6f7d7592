"""One module per verb; cli.py parses arguments and dispatches."""
