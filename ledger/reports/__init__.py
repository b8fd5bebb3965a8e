"""What people read: the HTML report, the web view, analyze's files and the controller's run
folder, rendered from a run's events through the templates in `templates/`."""
