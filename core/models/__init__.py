"""Model management without torch or Qt: the catalog of pairs, where models live, fit prediction, downloads.

The app's Qt process imports this package directly (it never imports torch), so nothing here may import
torch at module level.
"""
