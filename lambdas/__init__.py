"""Lambda function sources, one folder each; a folder is deployed as the root of its function's zip."""
