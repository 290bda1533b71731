"""streamwarden: access control for continuous queries over data streams on Spark."""
