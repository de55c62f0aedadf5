"""What both fake kubelet plugins (fakeplugin, fakedra) do the same way.

It lives beside them under e2e/ so that it imports as `e2e.kubeletplugin` both
in the repository and in the fakeplugin image, where the fake device plugin
itself runs as the top-level package `fakeplugin`.
"""
