"""The judge: smoothing, run health and the first anomaly (package created by the judge area)."""
