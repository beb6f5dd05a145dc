"""Building the node images a blueprint boots, on builder VMs, through the Compute API."""
