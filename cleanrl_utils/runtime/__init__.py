"""What an algorithm file imports while it trains; the offline tools live one level up, in cleanrl_utils/."""
