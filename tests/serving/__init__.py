"""serving/: the HTTP exchange: answers, routes, outcomes, batches."""
