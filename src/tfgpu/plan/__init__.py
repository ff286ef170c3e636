"""A judged target -> a Plan of Steps: which recipe and runner, and the exact argv. Pure: nothing is run here."""
