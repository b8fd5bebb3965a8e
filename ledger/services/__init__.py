"""The application services: one method per use case, between the command line and the
pure core and store."""
