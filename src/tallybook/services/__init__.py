"""Use cases over the storage port: postings, accounts, programs and capabilities."""
