"""Reports of studies (sweeps, capacity, comparisons), made from their JSON."""
