"""Small Python programs run inside pods with `kubectl exec ... python3 -c <source>`.

Each one reads its arguments from sys.argv and prints one JSON line.
"""
