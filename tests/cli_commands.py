"""The everyday command lines the golden-output and JSON tests share (each test adds its own cases)."""
FROST = "cudnn-kda-frost@e0b4ce98"
EVERYDAY = {
    "predict": ["predict", "--impl", "fla-kda@07b80f27", "--seq", "128K", "--heads", "96"],
    "compare": ["compare", "--impl", "fla-kda@07b80f27", "--impl", FROST, "--seq", "128K", "--heads", "96"],
    "models": ["models"],
    "validate": ["validate", "--from-records", "h200_run3_cudnn-frontend-1.32.0.json"],
    "timeline": ["timeline", "--impl", "cudnn-kda-hopper@1.32.0", "--seq", "8K", "--heads", "32"],
}
