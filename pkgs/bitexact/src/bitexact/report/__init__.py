"""Reports a person reads: markdown first, HTML with a plot of divergences."""
