"""Pure functions behind the monitoring roles: scrape targets from the inventory."""
