"""Sweeps: which speculative variant and k pay, per prompt class and load (issue 14).

``points`` names the points and writes their metadata; ``plan`` lays them out in waves and prices them.
Standard library only: the benchmark Job's zip application and the CDK app both import them.
"""
