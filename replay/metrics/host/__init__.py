"""What the host says about itself: its counts, timings, routes, signals, and cost."""
