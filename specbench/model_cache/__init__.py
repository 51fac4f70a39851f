"""The bucket-backed model cache's fill (``fill.py``): what the model-cache Job runs in the serving
image, from the code asset (specbench/bundle.py JOB_ENTRIES). Standard library only (and the image's
huggingface_hub)."""
