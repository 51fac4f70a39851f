"""Results: a request's record, a run's files and where they are stored (a directory or S3), and
llmperf's file format read and written."""
