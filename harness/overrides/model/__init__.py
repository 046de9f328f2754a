"""The project model: classes and modules read from the summaries, names bound and resolved, MROs and the class hierarchy."""
