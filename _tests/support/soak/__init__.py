"""The soak's rounds and their checks (concurrent writers, crashes, hostile ids, HTTP attacks):
the reliability tests run them at CI's counts, ``python -m bench soak`` at big ones."""
