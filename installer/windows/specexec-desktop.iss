; Inno Setup script: a per-user installer for SpecExec Desktop (no administrator rights), with a Start-menu
; entry, an optional desktop icon and an uninstaller. Build after PyInstaller (see installer/windows/build.ps1):
;   iscc /DAppVersion=0.1.0 /DFlavour=cpu installer\windows\specexec-desktop.iss
; Relative paths are from this script's folder (Inno Setup's SourceDir). Input: dist\specexec-desktop\
; (the one-folder bundle) and build\icons\app.ico (installer/make_icons.py).
; Output: dist\SpecExec-Desktop-<version>-windows-x64-<flavour>-setup.exe
; Chats, settings and downloaded models live in %LOCALAPPDATA%\SpecExec\SpecExec Desktop, outside the
; install folder, so updating or uninstalling keeps them.

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#ifndef Flavour
  #define Flavour "cpu"
#endif

[Setup]
AppId={{5B0C6F7E-2D1A-4C39-9B6E-5E3A0D8F2C41}
AppName=SpecExec Desktop
AppVersion={#AppVersion}
AppPublisher=SpecExec
DefaultDirName={localappdata}\Programs\SpecExec Desktop
DefaultGroupName=SpecExec Desktop
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir=..\..\dist
OutputBaseFilename=SpecExec-Desktop-{#AppVersion}-windows-x64-{#Flavour}-setup
SetupIconFile=..\..\build\icons\app.ico
UninstallDisplayIcon={app}\specexec-desktop.exe
UninstallDisplayName=SpecExec Desktop
Compression=lzma2/max
SolidCompression=yes
DiskSpanning=no
WizardStyle=modern

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
Source: "..\..\dist\specexec-desktop\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{group}\SpecExec Desktop"; Filename: "{app}\specexec-desktop.exe"
Name: "{group}\Uninstall SpecExec Desktop"; Filename: "{uninstallexe}"
Name: "{autodesktop}\SpecExec Desktop"; Filename: "{app}\specexec-desktop.exe"; Tasks: desktopicon

[Run]
Filename: "{app}\specexec-desktop.exe"; Description: "{cm:LaunchProgram,SpecExec Desktop}"; Flags: nowait postinstall skipifsilent

[UninstallDelete]
; Only what the program itself may leave inside its install folder; user data lives elsewhere and is kept.
Type: filesandordirs; Name: "{app}\_internal\__pycache__"
