"""The extension seam: the types a family and the report share. The family descriptor
(`family`), a case (`case`), one iteration's outcome (`outcome`), the leaderboard's data
(`tables`), the report's blocks (`blocks`) and a plot's context (`drawing`). These sit below
both the families and the report, so the report renders a family it is given without
importing any. Family authors import them from `ragmatrix`."""
