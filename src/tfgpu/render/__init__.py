"""Output: the one output layer, the doctor's JSON document, human report and CI annotations."""
