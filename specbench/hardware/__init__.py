"""What only a Trainium node can show (``facts.py``): read in a container placed as a sweep pod's
server (the hardware-facts Job) and checked by every sweep pod's gate. Standard library only: it runs
in the serving and benchmark images from the code asset (specbench/bundle.py POD_MODULES)."""
