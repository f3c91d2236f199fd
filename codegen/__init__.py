"""Export of proved Lean graphs to versioned JSON, and report rendering."""
