"""What users hand in, read strictly: JSON input models, raw timing samples, profiler output
and the JSON-file controller's run folders. Every rejection is one `InputError` line."""
