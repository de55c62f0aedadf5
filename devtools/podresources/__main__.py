from devtools.podresources import main

main()
