"""Code the test modules share (fixtures, peers, polling); no test module imports another."""
