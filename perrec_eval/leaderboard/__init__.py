"""Comparing runs: leaderboards across run folders (`perrecbench report`)."""
