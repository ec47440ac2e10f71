"""A card as a static HTML report (``frostgym report``): plots, the views, and a trajectory browser."""
