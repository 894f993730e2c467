"""diversity"""
