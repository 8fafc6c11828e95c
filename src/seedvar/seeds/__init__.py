"""One seed's life: an attempt that trains, resumes and evaluates it, and publishes it once."""
