"""Evidence: which calls reach an override and crash, for which class, under which conditions; the deciders and reachability."""
