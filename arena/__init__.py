"""The arena: anonymous battles, ratings and the leaderboard, import and export of votes."""
